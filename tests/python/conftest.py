import os
import sys

# The spawned jobs import these modules by name; spawn hands sys.path to the children.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
