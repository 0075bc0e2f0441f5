"""The rubric of each grading mode that the solve_first tests give `solve_first: true`."""

CRITERIA = ("criteria:\n  - {id: relevance, description: on topic, scale: [1, 5], "
            "anchors: {1: unrelated, 2: weak, 3: partly, 4: mostly, 5: fully}}\n")
RUBRICS = {  # mode -> the front matter of its rubric, before `solve_first: true`
    "rubric": "mode: rubric\n" + CRITERIA,
    "packed": "mode: rubric\n" + CRITERIA,
    "hybrid": "mode: hybrid\n" + CRITERIA + "checks:\n  - {id: short, kind: length, max_chars: 500}\n",
    "checklist": "mode: checklist\nrequirements:\n  - {id: number, text: gives a number}\n"
                 "  - {id: unit, text: gives a unit}\n",
    "pairwise": "mode: pairwise\n",
}
