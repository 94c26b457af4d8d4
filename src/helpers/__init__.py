"""Shared library of the eagle3-workbook: every notebook imports its logic from here."""
