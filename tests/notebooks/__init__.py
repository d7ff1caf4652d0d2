"""The notebooks: generated, laid out, executed (papermill), their libraries and installs."""
