"""Chapters: one home per notebook, imported by that notebook alone (`chNN_*` by
`notebooks/NN_*.ipynb`, checked by tests/test_code_homes.py). Delete a notebook and its chapter,
tests and data, and the rest of the workbook still runs. What two or more notebooks use lives in
the trunk, `helpers`; tools no notebook imports live in the kit, `kit`.
"""
