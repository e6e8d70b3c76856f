"""Example user policies (docs/policies.md, *Write your own policy*)."""
