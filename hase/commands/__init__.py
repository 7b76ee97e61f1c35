"""One module per `hase` subcommand (`register` declares its arguments, `run` calls one library function and
prints); `common` declares the arguments several commands share."""
