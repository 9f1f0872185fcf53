package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/vipd/vipd/control/config"
)

func main() {
	example := flag.String("example", "config.toml.example", "the example configuration `file` whose comments document the keys")
	version := flag.String("version", "dev", "version shown in the page's footer")
	flag.Parse()
	data, err := os.ReadFile(*example)
	if err == nil {
		err = config.WriteManPage(os.Stdout, string(data), *version)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkman: %v\n", err)
		os.Exit(1)
	}
}
