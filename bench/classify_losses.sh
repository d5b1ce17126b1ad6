#!/usr/bin/env bash
# Text classification on SpamAssassin (configs/spam_classify.json: easy_ham / hard_ham / spam,
# 3482 / 225 / 1679 training emails): cross-entropy vs label smoothing vs focal loss on macro-F1,
# each from scratch, then the focal run initialised from a byte-level language model pre-trained
# on the training emails' text (xtrain.model.init_from, same trunk shape). Same seed, steps, data
# order and schedule in every run; only the loss or the initial weights change. Prints one row per
# run: the final validation accuracy, macro-F1 and per-class F1 over all 660 validation emails.
#
# usage: bench/classify_losses.sh [STEPS (classifier, default 150)] [LM_STEPS (default 150)]
# env: XTRAIN (default build/xtrain), OUT (default a temp folder), THREADS (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
XTRAIN=${XTRAIN:-build/xtrain}
STEPS=${1:-150}
LM_STEPS=${2:-150}
OUT=${OUT:-$(mktemp -d /tmp/classify_losses.XXXX)}
THREADS=${THREADS:-2}
DATA=${XTRAIN_DATA_DIR:-$HOME/.cache/xtrain/data}/spam_assassin
[ -f "$DATA/train.jsonl" ] || { echo "no $DATA/train.jsonl: run scripts/fetch-data" >&2; exit 2; }
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ)  $(nproc) cores  load: $(cut -d' ' -f1-3 /proc/loadavg)  steps $STEPS, LM steps $LM_STEPS"

common=(--config configs/spam_classify.json --set "xtrain.steps=$STEPS" --set "xtrain.threads=$THREADS"
        --set xtrain.save_interval=0 --set xtrain.eval_interval=0)
run() {  # name, extra --set arguments...
  local name=$1
  shift
  local t0=$SECONDS
  "$XTRAIN" train "${common[@]}" "$@" --output "$OUT/$name" > "$OUT/$name.log" 2>&1 ||
    { tail -20 "$OUT/$name.log" >&2; exit 1; }
  echo "$name $((SECONDS - t0))" >> "$OUT/times"
}

# The unlabelled text of the training emails, for the language model.
/usr/bin/python3 -c '
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        out.write(json.loads(line)["text"] + "\n\n")' "$DATA/train.jsonl" "$OUT/emails.txt"
t0=$SECONDS
"$XTRAIN" train --set xtrain.model.type=gpt --set xtrain.data.type=text --set "xtrain.data.path=$OUT/emails.txt" \
  --set xtrain.model.layers=2 --set xtrain.model.d_model=128 --set xtrain.model.heads=4 --set xtrain.model.seq_len=128 \
  --set train_micro_batch_size_per_gpu=32 --set "xtrain.steps=$LM_STEPS" --set "xtrain.threads=$THREADS" \
  --set xtrain.eval_interval=0 --set "xtrain.save_interval=$LM_STEPS" --set xtrain.generate.tokens=0 \
  --set scheduler.params.warmup_num_steps=40 --output "$OUT/lm" > "$OUT/lm.log" 2>&1 || { tail -20 "$OUT/lm.log" >&2; exit 1; }
echo "lm $((SECONDS - t0))" >> "$OUT/times"
grep "done:" "$OUT/lm.log" | sed 's/^.*done:/LM pre-training (emails, bytes): done:/'

run ce --set xtrain.loss.type=cross_entropy --set 'xtrain.loss.alpha=[]'
run smooth --set xtrain.loss.type=cross_entropy --set 'xtrain.loss.alpha=[]' --set xtrain.loss.label_smoothing=0.1
run focal
run focal_pretrained --set "xtrain.model.init_from=$OUT/lm" --set xtrain.model.init_strict=false
run ce_pretrained --set xtrain.loss.type=cross_entropy --set 'xtrain.loss.alpha=[]' \
  --set "xtrain.model.init_from=$OUT/lm" --set xtrain.model.init_strict=false

/usr/bin/python3 - "$OUT" "$LM_STEPS" <<'PY'
import json, sys
out = sys.argv[1]
times = dict(line.split() for line in open(out + "/times"))
print("| run | loss | init | val accuracy | val macro-F1 | F1 easy_ham | F1 hard_ham | F1 spam | seconds |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
loss = {"ce": "cross-entropy", "smooth": "cross-entropy, smoothing 0.1", "focal": "focal g=2, alpha [1,4,1.5]",
        "focal_pretrained": "focal g=2, alpha [1,4,1.5]", "ce_pretrained": "cross-entropy"}
for name in ["ce", "smooth", "focal", "focal_pretrained", "ce_pretrained"]:
    acc = f1 = None
    conf = None
    for line in open(out + "/" + name + "/metrics.jsonl"):
        j = json.loads(line)
        if "val/accuracy" in j: acc = j["val/accuracy"]
        if "val/macro_f1" in j: f1 = j["val/macro_f1"]
        if j.get("event") == "val/confusion_matrix": conf = json.loads(j["text"])
    per = " | ".join("%.3f" % v for v in conf["f1"])
    init = ("LM, %s steps" % sys.argv[2]) if "pretrained" in name else "scratch"
    print("| %s | %s | %s | %.3f | %.3f | %s | %s |" % (name, loss[name], init, acc, f1, per, times[name]))
PY
echo "runs in $OUT"
