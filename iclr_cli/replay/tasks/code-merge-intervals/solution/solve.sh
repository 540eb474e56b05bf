sed -i 's/    for start, end in intervals:/    for start, end in sorted(intervals):/; s/start < merged\[-1\]\[1\]/start <= merged[-1][1]/' calendar_tools.py
python test_calendar_tools.py
