"""Text generation's groundwork: the sampling spec, the native reference loop and chat templates,
each twinned with a browser module under web/text/ where the browser needs it."""
