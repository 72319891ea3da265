"""``cn3 serve``: a local web page to look inside trained runs (predictions, learned graphs,
attention, comparisons, run and grid reports).

:mod:`.runs` loads the runs, :mod:`.views` turns a model's output on typed text into JSON,
:mod:`.items` reads a run's items, scores and curves, :mod:`.api` answers the JSON routes without
sockets and :mod:`.server` serves them and ``static/`` (the page) over HTTP.
"""
