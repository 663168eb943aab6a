"""The deploy checker behind `bundle doctor` (bundler.commands.doctor runs it over a URL):
fetching.py says what a browser fetches and what bundle.json says each file is, checks.py
checks each response, report.py holds the problems and the table, fixes.py says what to change
on any host where the host's module has no fix of its own."""
