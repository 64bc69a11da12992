"""Test helpers shared by every lane: result comparison and Hypothesis strategies."""
