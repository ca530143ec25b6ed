"""The failed tasks of a molecule run, short enough to read at the end of a CI log.

    molecule_digest.py DIR        reads DIR/molecule.log, writes DIR/failures.txt

scripts/molecule writes it for a scenario that failed and scripts/test prints it after its last line: a CI log is
often shown by its tail, and the failed task is hundreds of lines above it (the destroy step, the other lane's
output and the stage summaries come after).  Each failure: the molecule step, the TASK line, and the host's
``fatal:``/``failed:`` result; of a JSON result only the keys that say why (a shell task's ``cmd`` comes first
and can fill a screen), long strings by their end.  Failures a play ignores (``...ignoring``) are left out; the last
three are kept.
"""

import json
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
WHY = ("msg", "rc", "stderr", "stdout", "assertion", "evaluated_to", "item")
KEEP = 700      # characters kept of each long string (its end)
CUT = 1500      # characters of one failure at most
LAST = 3        # failures kept (the last ones)


def short(result_text):
    """The keys of a JSON result that say why it failed, long strings by their end; other text as it is."""
    try:
        result = json.loads(result_text)
    except ValueError:
        return result_text
    if not isinstance(result, dict):
        return result_text
    return json.dumps({key: value[-KEEP:] if isinstance(value, str) else value
                       for key, value in result.items() if key in WHY})


def failures(lines):
    """The failures of a molecule log's lines (ANSI colours removed), each as the text to print."""
    lines = [ANSI.sub("", line.rstrip("\n")) for line in lines]
    step = task = ""
    found = []
    for number, line in enumerate(lines):
        executing = re.search(r"\[(\S+ > \S+)\] Executing", line)
        if executing:
            step = executing.group(1)
        if line.startswith("TASK ["):
            task = line.rstrip("* ")
        elif re.match(r"(fatal|failed): \[", line) or line.startswith("ERROR! "):
            text, rest = line, lines[number + 1:number + 40]
            for more in rest:       # a result printed over several lines (the yaml callback)
                if not more.startswith((" ", "\t")):
                    break
                text += "\n" + more
            if any(more.strip() == "...ignoring" for more in rest[:text.count("\n") + 1]):
                continue            # ignore_errors: the play expects it
            head, arrow, result = text.partition(" => ")
            if arrow:
                text = head + arrow + short(result)
            if len(text) > CUT:
                text = text[:CUT] + " ... (cut; the whole result is in molecule.log)"
            found.append("\n".join(part for part in (step, task, text) if part))
    return found[-LAST:]


def main(out_dir):
    with open(out_dir + "/molecule.log", encoding="utf-8", errors="replace") as handle:
        found = failures(handle)
    with open(out_dir + "/failures.txt", "w", encoding="utf-8") as handle:
        handle.write("\n\n".join(found) + ("\n" if found else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
