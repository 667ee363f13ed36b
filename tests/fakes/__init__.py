"""Test doubles that live at the edge: fake provider servers, never patches of our code."""
