"""Integer codes shared by the kernels and their Python wrappers.

Statuses, policy codes, placement codes and sentinels are plain ints so the kernels compile once
for every configuration (a sweep never recompiles).
"""

# job status
NOT_ARRIVED = 0  # submit time not reached yet
OVERFLOW = 1  # arrived, held back by admission control (not active)
WAITING = 2  # active, holds no GPUs
RUNNING = 3  # active, holds its gang of GPUs
DONE = 4  # finished

# scheduling policies (built-in ordering kernels)
POL_FIFO = 0  # key: submit time
POL_LAS = 1  # key: attained service, wall-seconds (Blox)
POL_LAS_GPU = 2  # key: attained service, GPU-seconds
POL_SRTF = 3  # key: remaining work (s)
POL_SJF = 4  # key: total work (s), non-preemptive
POL_CUSTOM = 5  # key given by a user function, recomputed each step

# placements
PL_BLOX = 0  # Blox's scattered walk: the accumulated count must hit n exactly
PL_FIRST_FIT = 1  # any free GPUs, lowest-numbered first
PL_CONSOLIDATED = 2  # fewest nodes (best-fit single node when it fits in one); else wait

# time models
TM_ROUNDS = 0
TM_EVENTS = 1

NO_TIME = -1.0  # sentinel for "never" (first start / finish not reached): written as NaN outside
FREE = -1  # owner of a free GPU
