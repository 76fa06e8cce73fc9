"""Joins bench/gpu_report's table and bench/gpu_peer.py's into one, row by row, with the ratio of
the times and the issue's target where it sets one (run by tools/gpu_check.sh).

    python3 tools/gpu_side_by_side.py gpu_report.md pytorch_report.md
"""
import sys

# Row label prefix -> the most ember's time may be, as a multiple of PyTorch's.
TARGETS = {"GEMM": 1.05, "MLP training step": 1.3, "CNN training step": 1.3, "fp16 autocast + GradScaler step": 1.2,
           "bf16 autocast step": 1.2}


def rows(path):
    """(label, size) -> (time text, milliseconds, rate) for each data row of a Markdown table."""
    out = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 4 or not cells[2].endswith(" ms"):
                continue
            out[(cells[0], cells[1])] = (cells[2], float(cells[2].split()[0]), cells[3])
    return out


def main(ember_path, torch_path):
    ember, torch = rows(ember_path), rows(torch_path)
    print("| | size | ember | ember's rate | PyTorch | ember / PyTorch time | target |")
    print("|---|---|---|---|---|---|---|")
    for key, (text, ms, rate) in ember.items():
        label, size = key
        peer = torch.get(key)
        if peer is None:
            print(f"| {label} | {size} | {text} | {rate} | | | |")
            continue
        ratio = ms / peer[1]
        limit = next((v for k, v in TARGETS.items() if label.startswith(k)), None)
        verdict = "" if limit is None else f"≤ {limit:.2f}: {'met' if ratio <= limit else 'NOT MET'}"
        print(f"| {label} | {size} | {text} | {rate} | {peer[0]} | {ratio:.2f} | {verdict} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
