"""Static hosting: making a built folder deploy as it is, and checking a deployment.

- Hosts, one module each (netlify.py, cloudflare.py, vercel.py, github_pages.py, s3.py,
  nginx.py), found by name through registry.py: each defines `HOST = Host(...)` (see spec.py):
  its config file and writer, how its responses give it away, and its fixes for what `bundle
  doctor` finds. headers.py holds the headers every host is told to send; headers_file.py the
  `_headers` file Netlify and Cloudflare share; sizes.py the file size limit.
- publish.py: what bundler.stages.publish runs, the same for every host: split big files into
  parts, write the precompressed siblings (the models and runtime before the browser check, the
  rest once the pages are rendered: each file once), describe every served file in bundle.json's
  `files`, then write the chosen hosts' config files.
- doctor/: the deploy checker behind `bundle doctor`: what to fetch, the checks of each
  response, the report, and the fixes for any host.

Adding a host: a module named after it that defines `HOST`, its place in registry.py's HOSTS,
and its detection headers in tests/test_host_registry.py.

Nothing is imported here, so options and `bundle --help` import registry.py without brotli or
onnx: import a name from the module that owns it.
"""
