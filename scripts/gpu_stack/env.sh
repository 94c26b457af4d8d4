# env.sh: source on the GPU machine after install.sh, before anything runs on the stack.
# /tmp/site shadows the image's own packages (its torch 2.11.0 among them); JUPYTER_PATH lets
# nbconvert find its templates in a --target install.
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH JUPYTER_PATH=/tmp/site/share/jupyter
