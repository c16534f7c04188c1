from ocrserve.cli import main

main()
