"""An expert's table of answers as real models write them (issue 24), one row a case, each with the rule that must
read it: the grade a careful human would sign, and the name `graded.jsonl` records for it.

Shapes follow public eval logs and graders: lm-evaluation-harness's GSM8K filters (`#### X`, "The answer is X",
last number) and the Markdown finals chat models write ("Therefore, Janet makes **$18** every day.", "### Final
Answer\\n\\[\\boxed{18}\\]"), simple-evals' `Answer: X` lines, math-verify's test tables for MATH, and the MuSR
authors' "ANSWER:" prompt with the prose conclusions models write when they forget it.

Rows: GSM8K (question or None, gold, answer, outcome, rule, note); MATH-500 (gold, answer, outcome, rule, note);
MuSR (choices, gold index 0-based, answer, outcome, rule, note); REASONING (question id, content with inline
`<think>`, outcome, rule, note), graded through `evalkit capability --replay`.
"""

_Q = "How many dollars does she make every day at the farmers' market?"

GSM8K_MARKERS = [  # bold final statement, Answer: label, \boxed{}, a calculation inside the marker
    (None, "18", "She sells 16 - 3 - 4 = 9 eggs.\nTherefore, Janet makes **$18** every day from 9 eggs.",
     "correct", "gsm8k.bold_final", "bold amount, a later number in the same sentence"),
    (None, "42", "He gave away 8 of his 50 marbles.\nSo Tom has **42 marbles** left, 8 fewer than before.",
     "correct", "gsm8k.bold_final", "bold number with its unit"),
    (None, "42", "**Final answer: 42 marbles**", "correct", "gsm8k.answer_label", "label inside bold"),
    (None, "56", "There are 7 rows of 8 chairs.\nAnswer: 56", "correct", "gsm8k.answer_label", "simple-evals label"),
    (None, "56", "Answer: 7 × 8 = 56", "correct", "gsm8k.answer_label", "a calculation after the label: its result"),
    (None, "56", "Answer: 7 × 8 = 54", "wrong", "gsm8k.answer_label", "the result is read, and it is wrong"),
    (None, "60", "Each of the 12 boxes holds 5.\n\\boxed{12 \\cdot 5 = 60}", "correct", "gsm8k.boxed",
     "calculation inside boxed"),
    (None, "60", "The total is $\\boxed{60}$ minutes, since 12 × 5 = 60 and 3 breaks add 0.", "correct",
     "gsm8k.boxed", "boxed, later numbers in the sentence"),
    (None, "60", "Final Answer: $12 \\times 5 = 60$", "correct", "gsm8k.answer_label", "LaTeX times in the label"),
    (None, "18", "The answer is 18. 16 - 3 - 4 = 9 eggs are sold, 9 × 2 = 18.", "correct", "gsm8k.answer_label",
     "found: working after the answer's sentence is no calculation of it"),
    (None, "18", "The answer is 20. 16 - 3 - 4 = 9 and 9 × 2 = 18", "wrong", "gsm8k.answer_label",
     "found: the stated answer, not the later working's result"),
    (None, "42", "**Answer:** 15 + 27 = 42 marbles", "correct", "gsm8k.answer_label", "bold label, sum"),
    (None, "42", "### Final Answer\n\\[\n\\boxed{42}\n\\]", "correct", "gsm8k.boxed", "Qwen-style display box"),
    (None, "42", "The answer is: **42**", "correct", "gsm8k.answer_label", "bold number after the phrase"),
    (None, "18", "**Step 1:** 16 - 3 - 4 = 9 eggs\n**Step 2:** 9 × 2 = 18\nShe makes 18 dollars.", "correct",
     "gsm8k.last_line_number", "bold step labels in the working are no final statement"),
    (None, "18", "She keeps **3** for breakfast and **4** for muffins.\nSo she makes 18 dollars.", "correct",
     "gsm8k.last_line_number", "bold numbers in the working, not on the final line, are no answer"),
]

GSM8K_AFTER = [  # a check after the answer, the answer first and explained after, a closing pleasantry
    (None, "12", "Each box holds 48 / 4 = 12 cookies.\n#### 12\nCheck: 12 × 4 = 48 ✓", "correct",
     "gsm8k.hash_line", "check line after ####"),
    (None, "12", "So each friend gets 12 cookies.\n\nCheck: 12 × 4 = 48 ✓", "correct", "gsm8k.last_line_number",
     "a check line does not replace the final statement"),
    (None, "12", "Each friend gets 12 cookies.\nVerification: 12 + 12 + 12 + 12 = 48. Correct!", "correct",
     "gsm8k.last_line_number", "verification line"),
    (None, "18", "So she makes $18.\n\nDouble-check: 18 / 2 = 9 eggs sold ✓", "correct", "gsm8k.last_line_number",
     "double-check line with a tick"),
    (None, "12", "**12**\n\nExplanation: there are 48 cookies and 4 friends, so each gets 48 divided by 4.",
     "correct", "gsm8k.answer_first", "bold answer first, explanation after"),
    (None, "18", "Janet makes $18 a day.\n\nHere's how: her ducks lay 16 eggs, she eats 3 and bakes with 4, and "
     "sells the other 9 at $2.", "correct", "gsm8k.answer_first", "plain answer sentence first"),
    (None, "18", "Janet's ducks lay 16 eggs per day.\nFirst, she eats 3 and bakes with 4, leaving 9.\nSo she makes "
     "18 dollars.", "correct", "gsm8k.last_line_number", "a restated problem first is no answer given first"),
    (None, "18", "**18 dollars**\n\nStep 1: 16 - 3 - 4 = 9 eggs are left to sell at 2 each.", "correct",
     "gsm8k.answer_first", "a bold first line, then the steps"),
    (None, "18", "The answer is 18.\n\nHere's why: 16 - 3 - 4 = 9 eggs are sold at $2 each, and she keeps 0.",
     "correct", "gsm8k.answer_label", "answer phrase first, working after"),
    (None, "18", "#### 18\n\nI hope this helps! Let me know if you have 2 more questions.", "correct",
     "gsm8k.hash_line", "pleasantry with a number after ####"),
    (None, "18", "So she makes 18 dollars.\n\nI hope this helps! Let me know if you need 2 more examples.", "correct",
     "gsm8k.last_line_number", "pleasantry with a number after the final line"),
    (None, "18", "She makes 18 dollars every day.\n\nFeel free to ask if anything is unclear!", "correct",
     "gsm8k.last_line_number", "pleasantry without a number (was unparsed)"),
    (None, "18", "16 - 3 - 4 = 9 eggs left\n9 × 2 = 18 ✓", "correct", "gsm8k.last_line_number",
     "a tick on the final statement does not make it a check"),
    (None, "12", "**Answer: 12**\n\n**Verification:** 12 × 4 = 48 ✓", "correct", "gsm8k.answer_label",
     "bold label, bold verification"),
    (None, "18", "Total: 9 × 2 = 18 dollars.\n\nThank you for the fun problem, 10/10!", "correct",
     "gsm8k.last_line_number", "thanks line with numbers"),
]

GSM8K_WORDS = [  # numbers in words, signed numbers
    (None, "12", "The answer is twelve.", "correct", "gsm8k.answer_label", "a word after the phrase"),
    (None, "18", "#### eighteen", "correct", "gsm8k.hash_line", "a word after ####"),
    (None, "12", "So she has a dozen eggs left.", "correct", "gsm8k.last_line_number", "a dozen"),
    (None, "24", "So she needs two dozen eggs.", "correct", "gsm8k.last_line_number", "two dozen"),
    (None, "-5", "The answer is negative five.", "correct", "gsm8k.answer_label", "negative in words"),
    (None, "-3", "Answer: minus 3", "correct", "gsm8k.answer_label", "'minus' before digits"),
    (None, "-4", "The answer is negative 4 degrees.", "correct", "gsm8k.answer_label", "'negative' before digits"),
    (None, "-3", "Answer: minus three", "correct", "gsm8k.answer_label", "minus in words"),
    (None, "-5", "The temperature drops to −5 degrees.\n#### −5", "correct", "gsm8k.hash_line", "unicode minus"),
    (None, "7", "#### +7", "correct", "gsm8k.hash_line", "explicit plus sign"),
    (None, "-15", "His balance changes by -15 dollars.\n#### -15", "correct", "gsm8k.hash_line", "negative gold"),
    (None, "120", "The answer is one hundred and twenty.", "correct", "gsm8k.answer_label", "hundred and"),
    (None, "2500", "So the bakery sold two thousand five hundred cupcakes.", "correct", "gsm8k.last_line_number",
     "thousands in words on the final line"),
    (None, "0.5", "The answer is half.", "correct", "gsm8k.answer_label", "half"),
    (None, "2.5", "The answer is two and a half.", "correct", "gsm8k.answer_label", "two and a half"),
    (None, "1000000", "Answer: one million dollars", "correct", "gsm8k.answer_label", "a million"),
    (None, "16", "The answer is fifteen.", "wrong", "gsm8k.answer_label", "a wrong word number"),
    (None, "36", "The answer is thirty-six.", "correct", "gsm8k.answer_label", "hyphenated tens"),
    (None, "0", "The answer is zero.", "correct", "gsm8k.answer_label", "zero"),
    (None, "6", "She has half a dozen left.\n#### six", "correct", "gsm8k.hash_line", "six after ####"),
]

_MIN = "John reads for 2 hours and 10 minutes a day. How many minutes does he read each day?"
GSM8K_COMPOUND = [  # converted to the unit the question names, else no number guessed
    (_MIN, "130", "He reads 2 hours and 10 minutes.\n#### 2 hours and 10 minutes", "correct",
     "gsm8k.compound_converted", "#### compound, minutes asked"),
    (_MIN, "130", "The answer is 2 hours 10 minutes.", "correct", "gsm8k.compound_converted", "no 'and'"),
    (_MIN, "130", "So he reads for 2 hours and 10 minutes each day.", "correct", "gsm8k.compound_converted",
     "compound on the final line (was read as 10)"),
    (_MIN, "130", "#### 130 minutes", "correct", "gsm8k.hash_line", "already in the asked unit"),
    ("The drive took 150 minutes. How many hours did the trip take?", "2.5", "The trip took 2 hours and 30 minutes.",
     "correct", "gsm8k.compound_converted", "hours asked"),
    ("A movie starts at 7 pm. How long did the movie last?", "130", "The movie lasted 2 hours and 10 minutes.",
     "unparsed", "gsm8k.compound_no_unit", "no unit asked: no number guessed"),
    ("They left at noon. How long will the drive take?", "150", "#### 2 hours and 30 minutes", "unparsed",
     "gsm8k.compound_no_unit", "no unit asked after ####"),
    ("How tall is the fence in inches?", "63", "The fence is 5 feet 3 inches tall.", "correct",
     "gsm8k.compound_converted", "'in inches'"),
    ("How many ounces does the package weigh?", "35", "#### 2 pounds 3 ounces", "correct",
     "gsm8k.compound_converted", "pounds and ounces"),
    ("How many minutes will she spend?", "150", "Answer: 2 hours and 20 minutes", "wrong",
     "gsm8k.compound_converted", "converted, and wrong (140)"),
    ("How many seconds does it take?", "90", "It takes 1 minute and 30 seconds.", "correct",
     "gsm8k.compound_converted", "minute and seconds"),
    ("How much does the toy cost?", "3.5", "The toy costs 3 dollars and 50 cents.", "correct",
     "gsm8k.compound_converted", "money in dollars unless cents are asked"),
    ("How many days will the trip last?", "10", "That is 1 week and 3 days.", "correct", "gsm8k.compound_converted",
     "weeks and days"),
]

GSM8K_RETRACTED = [  # an answer stated then retracted, with and without a new one
    (None, "18", "The answer is 20. Wait, that's not right.", "unparsed", "gsm8k.retracted",
     "retracted, no new answer"),
    (None, "18", "The answer is 18. Wait, that's not right.", "unparsed", "gsm8k.retracted",
     "a right answer retracted is no answer"),
    (None, "18", "#### 20\nHmm, that's wrong: she also bakes with 4 eggs.", "unparsed", "gsm8k.retracted",
     "#### retracted"),
    (None, "18", "The answer is 20. Wait, that's not right. She sells 16 - 3 - 4 = 9 eggs, so 9 × 2 = 18.\n#### 18",
     "correct", "gsm8k.hash_line", "retracted, then a new ####"),
    (None, "18", "So she makes $20.\n\nActually, no, I made a mistake: she uses 4 eggs for muffins too. So she "
     "sells 9 eggs and makes $18.", "correct", "gsm8k.last_line_number", "new answer in a later sentence"),
    (None, "18", "Answer: 20\n\nScratch that.", "unparsed", "gsm8k.retracted", "scratch that"),
    (None, "18", "I get 20, but that can't be right since she only has 16 eggs.", "unparsed", "gsm8k.retracted",
     "a number in the retraction's own reason is no new answer"),
    (None, "18", "#### 18\n\nWait, let me double-check: 9 × 2 = 18. Yes, that's correct.", "correct",
     "gsm8k.hash_line", "a bare 'wait' is hesitation, not a retraction"),
    (None, "126", "The answer is 18, no wait, that's for one day; for a week it's 126.\nThe answer is 126.", "correct",
     "gsm8k.answer_label", "retracted then a new answer phrase"),
    (None, "18", "#### 20\n\nOops, that's incorrect. I forgot the muffins.", "unparsed", "gsm8k.retracted",
     "that's incorrect"),
    (None, "18", "She makes $18. That's not right... let me recompute. 16 - 3 = 13, 13 - 4 = 9, 9 * 2 = 18. So she "
     "makes $18 after all.", "correct", "gsm8k.last_line_number", "retracted, recomputed, restated"),
    (None, "18", "The answer is 20. I made a mistake.", "unparsed", "gsm8k.retracted", "I made a mistake"),
]

MATH_INEQUALITY = [  # inequalities against interval notation
    ("(2,\\infty)", "\\boxed{x > 2}", "correct", "math500.boxed", "x > 2"),
    ("(2,\\infty)", "\\boxed{x \\geq 2}", "wrong", "math500.boxed", "closed end differs"),
    ("(-\\infty, 0]", "So the solution is $\\boxed{x \\le 0}$.", "correct", "math500.boxed", "x <= 0"),
    ("(3,4]", "\\boxed{3 < x \\leq 4}", "correct", "math500.boxed", "double inequality"),
    ("(3,4]", "\\boxed{3 \\le x \\le 4}", "wrong", "math500.boxed", "double inequality, wrong end"),
    ("(-\\infty, 2) \\cup (3, \\infty)", "\\boxed{x < 2 \\text{ or } x > 3}", "correct", "math500.boxed",
     "union written with 'or'"),
    ("(-\\infty, 2) \\cup (3, \\infty)", "\\boxed{x<2 \\lor x>3}", "correct", "math500.boxed", "union with \\lor"),
    ("x \\in [-2,7]", "\\boxed{-2 \\le x \\le 7}", "correct", "math500.boxed", "gold written x in [a, b]"),
    ("(0,9) \\cup (9,36)", "\\boxed{0 < x < 36, x \\neq 9}", "correct", "math500.boxed", "a point taken out"),
    ("(5,\\infty)", "\\boxed{(5, \\infty)}", "correct", "math500.boxed", "interval as given"),
    ("(5,\\infty)", "\\boxed{x > -5}", "wrong", "math500.boxed", "sign of the end"),
    ("(-\\sqrt{3}, \\sqrt{3})", "\\boxed{-\\sqrt{3} < x < \\sqrt{3}}", "correct", "math500.boxed", "radical ends"),
]

MATH_DEGREES = [  # ° and ^\circ
    ("90^\\circ", "\\boxed{90°}", "correct", "math500.boxed", "unicode degree sign"),
    ("145^\\circ", "\\boxed{145^{\\circ}}", "correct", "math500.boxed", "braced circ"),
    ("30^\\circ", "\\boxed{30}", "correct", "math500.boxed", "degrees omitted"),
    ("30^\\circ", "\\boxed{30^\\circ}", "correct", "math500.boxed", "as the gold"),
    ("120^\\circ", "The angle is $\\boxed{120°}$.", "correct", "math500.boxed", "° in a sentence"),
    ("76^\\circ", "\\boxed{76 \\text{ degrees}}", "correct", "math500.boxed", "degrees as text"),
    ("36^\\circ", "\\boxed{36°}", "correct", "math500.boxed", "°"),
    ("55^\\circ", "\\boxed{35°}", "wrong", "math500.boxed", "wrong angle"),
    ("180^\\circ", "\\boxed{180^\\circ}", "correct", "math500.boxed", "straight angle"),
    ("\\frac{270}7\\text{ degrees}", "\\boxed{\\frac{270}{7}°}", "correct", "math500.boxed", "fraction of degrees"),
]

MATH_THOUSANDS = [  # LaTeX thousands separators
    ("10,\\!080", "\\boxed{10{,}080}", "correct", "math500.boxed", "{,} separator"),
    ("58,500", "\\boxed{58{,}500}", "correct", "math500.boxed", "{,} for a plain comma gold"),
    ("58,500", "\\boxed{58500}", "correct", "math500.boxed", "no separator"),
    ("58,500", "\\boxed{58,500}", "correct", "math500.boxed", "plain comma"),
    ("11,\\! 111,\\! 111,\\! 100", "\\boxed{11{,}111{,}111{,}100}", "correct", "math500.boxed", "several groups"),
    ("\\$32,\\!348", "\\boxed{\\$32{,}348}", "correct", "math500.boxed", "currency and {,}"),
    ("5000", "\\boxed{5{,}000}", "correct", "math500.boxed", "5{,}000"),
    ("5000", "\\boxed{5{,}001}", "wrong", "math500.boxed", "off by one"),
    ("10,\\!080", "\\boxed{10\\,080}", "correct", "math500.boxed", "thin space \\,"),
    ("1000000", "\\boxed{1{,}000{,}000}", "correct", "math500.boxed", "a million"),
]

MATH_REPEATING = [  # repeating decimals
    ("\\frac{2}{3}", "\\boxed{0.\\overline{6}}", "correct", "math500.boxed", "0.(6)"),
    ("\\frac{1}{6}", "\\boxed{0.1\\overline{6}}", "correct", "math500.boxed", "a fixed digit before the period"),
    ("\\frac{4}{11}", "\\boxed{0.\\overline{36}}", "correct", "math500.boxed", "two-digit period"),
    ("\\frac{4}{3}", "\\boxed{1.\\overline{3}}", "correct", "math500.boxed", "whole part"),
    ("\\frac{1}{3}", "\\boxed{0.\\overline{3}}", "correct", "math500.boxed", "one third"),
    ("\\frac{1}{3}", "\\boxed{0.\\overline{6}}", "wrong", "math500.boxed", "another fraction"),
    ("1", "\\boxed{0.\\overline{9}}", "correct", "math500.boxed", "0.999... is 1"),
    ("\\frac{1}{3}", "\\boxed{0.33}", "wrong", "math500.boxed", "a rounded decimal is another value"),
    ("-\\frac{2}{3}", "\\boxed{-0.\\overline{6}}", "correct", "math500.boxed", "negative"),
    ("\\frac{5}{6}", "\\boxed{0.8\\bar{3}}", "correct", "math500.boxed", "\\bar for the period"),
]

MATH_TEXT = [  # a text answer in bold or after "Answer:" with no box
    ("\\text{ellipse}", "The equation describes an ellipse.\n\n**Answer:** ellipse", "correct", "math500.answer_label",
     "conic after a bold label"),
    ("\\text{ellipse}", "Completing the square, the graph is an **ellipse**.", "correct", "math500.answer_label",
     "conic in bold on the final line"),
    ("\\text{ellipse}", "**Answer:** parabola", "wrong", "math500.answer_label", "another conic"),
    ("\\text{Evelyn}", "Evelyn has the greatest average speed.\n\nAnswer: Evelyn", "correct", "math500.answer_label",
     "a name"),
    ("\\text{east}", "Final answer: East", "correct", "math500.answer_label", "a direction, any case"),
    ("\\text{even}", "So $f$ is **even**.", "correct", "math500.answer_label", "a word in bold"),
    ("\\text{even}", "Answer: odd", "wrong", "math500.answer_label", "the other word"),
    ("\\text{(C)}", "Answer: (C)", "correct", "math500.answer_label", "a letter choice"),
    ("\\text{(E)}", "The answer is **(E)**.", "correct", "math500.answer_label", "a letter choice in bold"),
    ("\\text{Navin}", "The final answer is Navin.", "correct", "math500.answer_label", "final answer is"),
    ("\\text{ellipse}", "Answer: an ellipse", "correct", "math500.answer_label", "article dropped"),
    ("3", "**Answer:** 3", "correct", "math500.answer_label", "a number after a label"),
]

MATH_MULTI = [  # multi-part answers in several boxes
    ("(8,-2)", "So $x = \\boxed{8}$, $y = \\boxed{-2}$.", "correct", "math500.multi_boxed", "ordered pair"),
    ("(8,-2)", "x = \\boxed{8}, y = \\boxed{-2}", "correct", "math500.multi_boxed", "bare"),
    ("(8,-2)", "x = \\boxed{-2}, y = \\boxed{8}", "wrong", "math500.multi_boxed", "order matters for a pair"),
    ("3, 5, 7", "The solutions are $\\boxed{3}$, $\\boxed{5}$, and $\\boxed{7}$.", "correct", "math500.multi_boxed",
     "a list of solutions"),
    ("1,-2", "$x = \\boxed{1}$ or $x = \\boxed{-2}$", "correct", "math500.multi_boxed", "roots joined with or"),
    ("(6,31,-1)", "$a = \\boxed{6}$, $b = \\boxed{31}$, $c = \\boxed{-1}$", "correct", "math500.multi_boxed",
     "a triple"),
    ("(-2,1)", "\\boxed{-2} and \\boxed{1}", "correct", "math500.multi_boxed", "pair, 'and'"),
    ("(15,-29)", "\\boxed{(15, -29)}", "correct", "math500.boxed", "one box holding the pair"),
    ("\\left( \\frac{3}{2}, -13 \\right)", "$x=\\boxed{\\frac{3}{2}}$, $y=\\boxed{-13}$", "correct",
     "math500.multi_boxed", "fraction part"),
    ("\\frac{14}{3}", "First \\boxed{3}, then \\boxed{\\frac{14}{3}}", "correct", "math500.boxed",
     "single gold: the last box alone"),
    ("(1,-16,-4,43)", "$(a,b,c,d) = (\\boxed{1}, \\boxed{-16}, \\boxed{-4}, \\boxed{43})$", "correct",
     "math500.multi_boxed", "a quadruple"),
    ("3, 5, 7", "\\boxed{3}, \\boxed{5}", "wrong", "math500.boxed", "fewer boxes than parts: the last box"),
    ("\\frac{14}{3}", "$\\boxed{\\frac{14}{3}}$\n\nFinal answer: 14/3", "correct", "math500.boxed",
     "a stated answer after the box that agrees: one reading"),
]

_P2 = ["Mackenzie", "Ana"]
_P3 = ["Mackenzie", "Ana", "Priya"]
_OBJ = ["piano", "producer's desk", "recording booth"]
_TEAM = ["Animal Caretaker: Alex, Exhibit Cleaner: Mia and Olivia",
         "Animal Caretaker: Olivia, Exhibit Cleaner: Alex and Mia",
         "Animal Caretaker: Mia, Exhibit Cleaner: Alex and Olivia"]
_RECIT = ["Recitation: David, Scoring: Lily and Rachel", "Recitation: Lily, Scoring: David and Rachel",
          "Recitation: Rachel, Scoring: David and Lily"]
_PANTRY = ["cooking station", "dining tables", "pantry", "pantry ", "upper cabinet"]

MUSR_PROSE = [  # the answer stated in prose, no ANSWER: line
    (_P2, 1, "Ana lied about her alibi and owned the weapon.\n\nSo the murderer must have been Ana.", "correct",
     "musr.prose_conclusion", "so ... must have been"),
    (_P2, 0, "Mackenzie had access to the garage.\n\nTherefore, the most likely murderer is Mackenzie.", "correct",
     "musr.prose_conclusion", "therefore"),
    (_P2, 0, "Thus, Mackenzie is the killer. She had the motive, the means and the opportunity.", "correct",
     "musr.prose_conclusion", "the concluding sentence before a coda"),
    (_OBJ, 1, "He saw the earphones on the desk.\n\nIn conclusion, Danny would look at the producer's desk.",
     "correct", "musr.prose_conclusion", "object placement"),
    (_P2, 0, "Mackenzie had a motive. Ana had an alibi.", "unparsed", "musr.no_answer",
     "prose that concludes nothing gets no credit"),
    (_P2, 0, "Based on the evidence, it was Mackenzie, not Ana.", "correct", "musr.prose_conclusion",
     "X, not Y in a conclusion"),
    (_P2, 0, "So it was either Mackenzie or Ana.", "wrong", "musr.hedge", "a hedged conclusion"),
    (_P2, 1, "The evidence points to Ana.", "correct", "musr.prose_conclusion", "the evidence points to"),
    (_P2, 0, "Putting it all together, the murderer is Mackenzie.\n\nI hope this analysis helps!", "correct",
     "musr.prose_conclusion", "a pleasantry after the conclusion"),
    (_P3, 2, "Priya must be the murderer.", "correct", "musr.prose_conclusion", "must be"),
    (_OBJ, 2, "Ultimately, the recording booth is where Danny would look.", "correct", "musr.prose_conclusion",
     "ultimately"),
    (_P3, 1, "So the thief must have been Priya.", "wrong", "musr.prose_conclusion", "a conclusion, wrong"),
    (_P2, 0, "Weighing both alibis, I choose option 1: Mackenzie.", "correct", "musr.prose_conclusion",
     "found: 'I choose' concludes"),
    (_P2, 0, "So it must have been Mackenzie, since Ana was never near the study.", "correct",
     "musr.prose_conclusion", "found: the reason after 'since' names no second answer (was a hedge)"),
    (_OBJ, 1, "So Danny would most likely look at the producer’s desk.", "correct", "musr.prose_conclusion",
     "found: curly apostrophe in a conclusion"),
    (_P2, 0, "Given that Ana had an alibi, Mackenzie must be the murderer.", "correct", "musr.prose_conclusion",
     "found: a leading 'given that' clause names no second answer (was a hedge)"),
    (_P2, 0, "Therefore, it can't be Ana.", "unparsed", "musr.no_answer",
     "found: a choice ruled out is not the answer (was read as Ana)"),
]

MUSR_NOT = [  # X, not Y: X is the answer, not a hedge
    (_P3, 2, "ANSWER: Priya, not Mackenzie", "correct", "musr.answer_line", "X, not Y"),
    (_P3, 0, "ANSWER: Mackenzie, not Priya", "correct", "musr.answer_line", "X, not Y, first choice"),
    (_P3, 2, "ANSWER: Priya rather than Ana", "correct", "musr.answer_line", "rather than"),
    (_P3, 2, "ANSWER: It was Priya and not Ana.", "correct", "musr.answer_line", "and not"),
    (_P3, 2, "ANSWER: not Ana but Priya", "correct", "musr.answer_line", "not Y but X"),
    (_P3, 1, "ANSWER: Priya, not Ana", "wrong", "musr.answer_line", "the rejected one is the gold"),
    (_OBJ, 1, "ANSWER: the producer's desk, not the piano", "correct", "musr.answer_line", "places"),
    (_P3, 2, "ANSWER: Priya or Ana", "wrong", "musr.hedge", "'or' stays a hedge"),
    (_P3, 2, "ANSWER: Priya instead of Mackenzie", "correct", "musr.answer_line", "instead of"),
    (_P3, 2, "ANSWER: Priya (not Ana)", "correct", "musr.answer_line", "(not Y)"),
    (_OBJ, 1, "ANSWER: the producer’s desk, not the piano", "correct", "musr.answer_line",
     "found: a curly apostrophe, as chat models write it, names the choice (was unparsed)"),
    (_P2, 0, "ANSWER: Mackenzie, because Ana had an alibi", "correct", "musr.answer_line",
     "found: the reason names no second answer (was a hedge)"),
]

MUSR_RECONSIDERED = [  # a reconsideration after the answer line wins
    (_P2, 0, "ANSWER: 2\n\nHmm, looking again at the timeline, Ana could not have reached the study. So my final "
     "answer is 1.", "correct", "musr.reconsidered", "final answer after the line"),
    (_P2, 1, "ANSWER: 2\n\nHmm, looking again at the timeline, Ana could not have reached the study. So my final "
     "answer is 1.", "wrong", "musr.reconsidered", "the later answer wins even when the first was right"),
    (_P2, 0, "ANSWER: 2\n\nOn reflection, I'll go with Mackenzie.", "correct", "musr.reconsidered", "I'll go with"),
    (_P2, 0, "ANSWER: 2\n\nActually, I want to change my answer to 1 - Mackenzie.", "correct", "musr.reconsidered",
     "change my answer to"),
    (_P2, 0, "ANSWER: 1\n\nThe answer is 1 because Mackenzie had the means.", "correct", "musr.answer_line",
     "a restatement that agrees changes nothing"),
    (_P2, 1, "ANSWER: 1\n\nWait, Mackenzie had an alibi. The final answer is Ana.", "correct", "musr.reconsidered",
     "by name"),
    (_P3, 2, "**ANSWER: 1**\n\nLet me reconsider... Priya had the key. My final answer is **3**.", "correct",
     "musr.reconsidered", "bold restatement"),
    (_P2, 0, "ANSWER: 1\n\nThank you! The answer is definitely correct.", "correct", "musr.answer_line",
     "a remark naming no choice changes nothing"),
    (_OBJ, 2, "ANSWER: 2\n\nHowever, he moved them after the meeting, so the answer would be the recording booth.",
     "correct", "musr.reconsidered", "answer would be"),
    (_P2, 0, "ANSWER: 2\nWait, on reflection:\nANSWER: 1", "correct", "musr.answer_line", "a second ANSWER line"),
    (_P2, 0, "ANSWER: 1\n\nNote: the answer would be different if Ana had no alibi.", "correct", "musr.answer_line",
     "found: prose mentioning a choice after 'answer would be' is no restatement (was read as Ana)"),
]

MUSR_TEAM = [  # team allocations with roles and names in another order
    (_TEAM, 1, "ANSWER: Exhibit Cleaner: Alex and Mia, Animal Caretaker: Olivia", "correct", "musr.team_assignment",
     "roles swapped"),
    (_TEAM, 1, "ANSWER: Animal Caretaker: Olivia, Exhibit Cleaner: Mia and Alex", "correct", "musr.team_assignment",
     "names swapped"),
    (_TEAM, 1, "ANSWER: Olivia as Animal Caretaker; Alex and Mia as Exhibit Cleaners", "correct",
     "musr.team_assignment", "names before roles, plural role"),
    (_TEAM, 1, "ANSWER: Exhibit Cleaner: Mia and Olivia, Animal Caretaker: Alex", "wrong", "musr.team_assignment",
     "another allocation"),
    (_TEAM, 1, "ANSWER: Animal Caretaker: Olivia; Exhibit Cleaner: Mia, Alex", "correct", "musr.team_assignment",
     "semicolon and comma"),
    (_TEAM, 1, "The answer is Animal Caretaker: Olivia, Exhibit Cleaners: Mia and Alex.", "correct",
     "musr.team_assignment", "stated answer"),
    (_TEAM, 1, "ANSWER: 2 - Animal Caretaker: Olivia, Exhibit Cleaner: Alex and Mia", "correct", "musr.answer_line",
     "number with its text"),
    (_RECIT, 2, "ANSWER: Scoring: Lily and David, Recitation: Rachel", "correct", "musr.team_assignment",
     "another row"),
    (_RECIT, 2, "ANSWER: Rachel for Recitation, and David and Lily for Scoring", "correct", "musr.team_assignment",
     "'for' phrasing"),
    (_RECIT, 2, "ANSWER: Scoring: Rachel and Lily, Recitation: David", "wrong", "musr.team_assignment",
     "the first allocation reordered"),
    (_RECIT, 0, "ANSWER: Recitation: David, Scoring: Rachel and Lily", "correct", "musr.team_assignment",
     "names swapped"),
]

MUSR_OPTION = [  # Option 2 / Choice 2
    (_P2, 0, "ANSWER: Option 1", "correct", "musr.option_number", "Option N"),
    (_P2, 0, "ANSWER: Choice 1", "correct", "musr.option_number", "Choice N"),
    (_P3, 1, "ANSWER: option (2)", "correct", "musr.option_number", "parenthesised"),
    (_P3, 1, "ANSWER: Option #2", "correct", "musr.option_number", "hash"),
    (_P3, 1, "The answer is Choice 2.", "correct", "musr.option_number", "stated"),
    (_P3, 1, "ANSWER: Option 3", "wrong", "musr.option_number", "another option"),
    (_P3, 1, "ANSWER: Option 4", "unparsed", "musr.number_out_of_range", "no such option"),
    (_P3, 1, "**ANSWER: Option 2 - Ana**", "correct", "musr.option_number", "bold, with its text"),
    (_OBJ, 1, "ANSWER: Choice 2 (producer's desk)", "correct", "musr.option_number", "with its text in brackets"),
    (_P3, 1, "ANSWER: choice number 2", "correct", "musr.option_number", "choice number N"),
]

MUSR_CONFLICT = [  # a choice number that contradicts the text it names: wrong, recorded as contradictory
    (_P2, 0, "ANSWER: 2 (Mackenzie)", "wrong", "musr.number_text_conflict", "text right, number wrong"),
    (_P2, 1, "ANSWER: 2 (Mackenzie)", "wrong", "musr.number_text_conflict", "number right: never the number alone"),
    (_P2, 0, "ANSWER: 1 - Ana", "wrong", "musr.number_text_conflict", "dash form"),
    (_P3, 2, "ANSWER: 3 - Ana", "wrong", "musr.number_text_conflict", "three choices"),
    (_OBJ, 1, "ANSWER: 2 - piano", "wrong", "musr.number_text_conflict", "a place"),
    (_OBJ, 1, "ANSWER: (2) recording booth", "wrong", "musr.number_text_conflict", "bracketed number"),
    (_P3, 2, "ANSWER: Option 3 (Mackenzie)", "wrong", "musr.number_text_conflict", "Option N with another text"),
    (_P3, 2, "ANSWER: 3 (Priya)", "correct", "musr.answer_line", "consistent: no conflict"),
    (_PANTRY, 3, "ANSWER: 3 (pantry)", "correct", "musr.answer_line", "a twin's number and text agree"),
    (_P3, 2, "ANSWER: 2 (Priya, not Ana)", "wrong", "musr.number_text_conflict", "text names 3 after a rejection"),
    (_P2, 0, "ANSWER: Mackenzie (2)", "wrong", "musr.number_text_conflict",
     "found: text first, then a number that contradicts it (was read as the text alone)"),
    (_P2, 0, "ANSWER: Mackenzie (1)", "correct", "musr.answer_line", "text then its own number"),
]

_STRLEN = "```python\ndef strlen(string: str) -> int:\n    return len(string)\n```"
REASONING = [  # inline <think> in content: only the text after the last </think> is graded
    ("gsm8k:0", "<think>16-3-4=9, 9*2=18. #### 18</think>\nI am not sure.", "unparsed", "gsm8k.no_number",
     "#### only inside reasoning"),
    ("gsm8k:0", "<think>Maybe 20? No: #### 18</think>\n#### 18", "correct", "gsm8k.hash_line", "answer after"),
    ("gsm8k:0", "<think>The answer is 18.</think>\n\nThe answer is 20.", "wrong", "gsm8k.answer_label",
     "the answer, not the draft"),
    ("gsm8k:0", "template opened it\n</think>\n\n#### 18", "correct", "gsm8k.hash_line", "closing tag alone"),
    ("gsm8k:0", "<think>16 - 3 - 4 = 9, so #### 18", "unparsed", "gsm8k.no_number", "never closed: no answer"),
    ("gsm8k:0", "<think>first draft: #### 20</think>\nJanet makes **$18** a day.", "correct", "gsm8k.bold_final",
     "rejected draft in reasoning never counts"),
    ("math500:test/algebra/2584.json", "<think>\\boxed{\\frac{14}{3}}</think>\nI could not finish.", "unparsed",
     "math500.math_verify_fallback", "box only inside reasoning"),
    ("math500:test/algebra/2584.json", "<think>try \\boxed{5}</think>\nSo $x = \\boxed{\\frac{14}{3}}$.", "correct",
     "math500.boxed", "box after"),
    ("math500:test/algebra/2584.json", "<think>\\boxed{\\frac{14}{3}}</think>\n\\boxed{5}", "wrong", "math500.boxed",
     "the right box was only a draft"),
    ("math500:test/algebra/2584.json", "<think>x = 14/3", "unparsed", "math500.math_verify_fallback",
     "never closed"),
    ("musr:murder_mysteries/0", "<think>ANSWER: 1</think>\nHmm.", "unparsed", "musr.no_answer",
     "ANSWER only inside reasoning"),
    ("musr:murder_mysteries/0", "<think>ANSWER: 2 would be wrong</think>\nANSWER: 1", "correct", "musr.answer_line",
     "answer after"),
    ("musr:murder_mysteries/0", "<think>So the murderer must have been Mackenzie.</think>\nI cannot decide.",
     "unparsed", "musr.no_answer", "a conclusion only inside reasoning"),
    ("musr:murder_mysteries/0", "<think>Mackenzie</think>ANSWER: 2", "wrong", "musr.answer_line", "draft differs"),
    ("humanevalplus:HumanEval/23", "<think>" + _STRLEN + "</think>\nSee above.", "unparsed",
     "humanevalplus.no_entry_point", "code only inside reasoning"),
    ("humanevalplus:HumanEval/23", "<think>draft: def strlen(s): return 0</think>\n" + _STRLEN, "correct",
     "humanevalplus.fenced_entry_point", "code after"),
    ("humanevalplus:HumanEval/23", "<think>" + _STRLEN + "</think>", "unparsed", "humanevalplus.no_code",
     "nothing after the reasoning"),
    ("humanevalplus:HumanEval/23", "<think>I'll write it.</think>\n```python\ndef strlen(string):\n"
     "    return len(string) + 1\n```", "wrong", "humanevalplus.fenced_entry_point", "wrong code after"),
]

GSM8K = GSM8K_MARKERS + GSM8K_AFTER + GSM8K_WORDS + GSM8K_COMPOUND + GSM8K_RETRACTED
MATH500 = MATH_INEQUALITY + MATH_DEGREES + MATH_THOUSANDS + MATH_REPEATING + MATH_TEXT + MATH_MULTI
MUSR = MUSR_PROSE + MUSR_NOT + MUSR_RECONSIDERED + MUSR_TEAM + MUSR_OPTION + MUSR_CONFLICT
CLASSES = {"gsm8k markers": GSM8K_MARKERS, "gsm8k after the answer": GSM8K_AFTER, "gsm8k words": GSM8K_WORDS,
           "gsm8k compound": GSM8K_COMPOUND, "gsm8k retracted": GSM8K_RETRACTED,
           "math inequality": MATH_INEQUALITY, "math degrees": MATH_DEGREES, "math thousands": MATH_THOUSANDS,
           "math repeating": MATH_REPEATING, "math text": MATH_TEXT, "math multi-part": MATH_MULTI,
           "musr prose": MUSR_PROSE, "musr X not Y": MUSR_NOT, "musr reconsidered": MUSR_RECONSIDERED,
           "musr team": MUSR_TEAM, "musr option": MUSR_OPTION, "musr conflict": MUSR_CONFLICT,
           "reasoning": REASONING}
