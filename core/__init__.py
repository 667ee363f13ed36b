"""The ground floor: what every other floor may use."""
