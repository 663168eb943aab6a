from bundler.cli import main

main()
