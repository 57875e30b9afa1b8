"""skyrl's wandb sidecar: drives a wandb run with the official `wandb` package.

Reads one JSON object per line on stdin and answers one per line on stdout:
  {"init": {"project", "name", "id", "config", "dir"}} -> {"ready": true, "id", "dir"} | {"error"}
  {"log": {...}, "step": N}                           -> {"ok": N} | {"error"}
  {"finish": exit_code}                               -> {"finished": true}
WANDB_MODE, WANDB_DIR, WANDB_API_KEY, WANDB_ENTITY are wandb's own variables.
"""
import json
import sys

# Answers go to the real stdout; anything else printing goes to stderr.
out = sys.stdout
sys.stdout = sys.stderr


def reply(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()


try:
    import wandb
except Exception as e:  # noqa: BLE001 - any import failure is reported
    reply({"error": f"cannot import wandb in {sys.executable}: {e} (pip install wandb)"})
    sys.exit(0)

run = None
for line in sys.stdin:
    msg = json.loads(line)
    try:
        if "init" in msg:
            a = msg["init"]
            run = wandb.init(
                project=a["project"],
                name=a["name"],
                id=a.get("id"),
                resume="allow",
                config=a["config"],
                dir=a.get("dir"),
            )
            reply({"ready": True, "id": run.id, "dir": run.dir})
        elif "log" in msg:
            run.log(msg["log"], step=msg["step"])
            reply({"ok": msg["step"]})
        elif "finish" in msg:
            run.finish(exit_code=msg["finish"])
            reply({"finished": True})
            break
    except Exception as e:  # noqa: BLE001 - the host decides what to do
        reply({"error": f"{type(e).__name__}: {e}"})
