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
POL_CUSTOM = 5  # key given by a user function (from Python each step, or compiled per job: kernels/userpol.py)
POL_TIRESIAS = 6  # discretized 2D-LAS: queue of attained GPU-seconds, FIFO within a queue
POL_GITTINS = 7  # Tiresias' Gittins-index variant: queue, then the highest index
POL_THEMIS = 8  # finish-time fairness: worst rho first (with the fairness knob)
POL_PLAN = 9  # a planner (Gavel, Optimus, user): per job a key, a GPU type and a size each step
POL_CUSTOM_FULL = 10  # a compiled per-job user policy that reads the time: every active job re-keyed each step

# how a policy's keys behave (decides which path a scheduling step takes)
KIND_STATIC = 0  # a waiting job's key does not move while it waits: sorted waiting queue
KIND_FULL = 1  # every key may move: all active jobs are re-sorted each step
KIND_PLAN = 2  # keys, types and sizes come from a planner each step

# placements
PL_BLOX = 0  # Blox's scattered walk: the accumulated count must hit n exactly
PL_FIRST_FIT = 1  # any free GPUs, lowest-numbered first
PL_CONSOLIDATED = 2  # fewest nodes (best-fit single node when it fits in one); else wait
PL_TOPOLOGY = 3  # one node, else one rack, else anywhere (best fit at each level)
PL_YARN = 4  # Tiresias' yarn: first node that holds it; else idle nodes whole + the first node holding the rest

# time models
TM_ROUNDS = 0
TM_EVENTS = 1

# cluster events
EV_FAIL = 0  # node goes down; jobs on it are killed (progress since the last checkpoint lost)
EV_RECOVER = 1  # node comes back (or is added) with every GPU free

# a planned GPU type: any type / do not run this step
ANY_TYPE = -1
NO_RUN = -2

NO_TIME = -1.0  # sentinel for "never" (first start / finish not reached): written as NaN outside
FREE = -1  # owner of a free GPU
