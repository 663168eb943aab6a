"""The stages of `bundle build`, each a function that takes what the stages before it produced and
returns a frozen result; bundler.commands.build runs them in order and assembles the manifest
once from their results (assemble.py).

    prepare.check       the inputs, before any folder is made            -> Checked
    prepare.fetch       the onnxruntime-web files, before any folder     -> Fetched
    prepare.prepare     runtime and browser modules copied, model fitted -> Prepared
    variants.make       each session's model optimised, each of its
                        variants made and measured (make_session)        -> Made
    choose.every_variant, choose.choose_auto, combine.choose_combination
                        which variants ship per session (auto: checked
                        and timed; several sessions: combinations)       -> Chosen
    publish.heavy       models and runtime split and compressed          -> Published
    verify.verify       the browser check against native onnxruntime     -> Verified
    render.render       types and pages written                          -> Rendered
    publish.finish      the rest compressed and listed, host configs     -> Published
    assemble.assemble   the manifest, from the results (written once)    -> Manifest

A stage that needs a manifest before the last (the browser check, auto's timing) gets one
assembled from the results so far; nothing is read back from the folder.
"""
