"""The workbook's library, one package per concept; imports run one way only:

    common  <-  eagle3  <-  engine  <-  analytics, serving  <-  tiny, tools

Notebooks import modules from the package faces (`from helpers.engine import lifecycle`);
nothing happens at import time.
"""

__all__ = ["analytics", "common", "eagle3", "engine", "serving", "tiny", "tools"]
