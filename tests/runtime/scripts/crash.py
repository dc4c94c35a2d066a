import sys

print("about to fail")
if len(sys.argv) > 1:
    sys.exit(int(sys.argv[1]))
raise ValueError("boom: the dataset path does not exist")
