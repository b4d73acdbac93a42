"""One module per input shape, each a Reader (readers/base.py); read.READERS lists them in order."""
