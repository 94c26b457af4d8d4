# The H200 image's platform as pip's --platform flags: CPython 3.12 on x86-64 Linux, every manylinux
# tag up to 2_39 (pip matches each tag exactly; the wheels resolved need glibc 2.31 at most).
PLATFORM_FLAGS=(--python-version 3.12 --implementation cp --only-binary=:all:)
for n in 5 12 17 18 24 25 26 27 28 29 31 32 34 35 36 37 38 39; do
  PLATFORM_FLAGS+=(--platform "manylinux_2_${n}_x86_64")
done
PLATFORM_FLAGS+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64 --platform any)
