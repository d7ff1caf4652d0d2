"""Rules of the repository as a whole: the layer contracts, where `make setup` installs from."""
