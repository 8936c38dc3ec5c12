"""The REST API (DRF): thin views over services and selectors."""
