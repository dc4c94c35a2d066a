import time

print("waiting forever", flush=True)
while True:
    time.sleep(0.5)
