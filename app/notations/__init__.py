"""The notations, pure: text to an immutable model and back to canonical text, one package
per family (momotor, flux, gridengine, debusine); errors.py says where a text went wrong."""
