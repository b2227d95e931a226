"""The one decision core: job table, snapshots, decisions and the mechanism that applies them.

Both drivers (the simulator in quanta.sim and the runtime) keep their jobs in a JobTable, build a
Snapshot from it, ask the policy for a Decision and let the Mechanism turn it into transitions.
"""
