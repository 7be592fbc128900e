"""google.rpc stubs (Status and the error details), generated under this package so that nothing
shadows googleapis-common-protos' `google.rpc`.

Their proto file names and message names are googleapis' own; contextd.errors imports
googleapis-common-protos' modules instead when they are installed, so that one process never
registers google.rpc twice.
"""
