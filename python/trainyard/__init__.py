"""Trainyard, installed from its wheel: a declarative experiment runner for deep-learning training.

The product is the C++ executables under trainyard/bin/; the `trainyard` command runs them through
trainyard._launcher, which checks the torch package they were built against first.
"""
