package main

// The CLI reference, docs/cli/*.md, is generated from the commands by
// TestCLIDocs, which fails when it is stale.
//go:generate go test -run ^TestCLIDocs$ -update-cli-docs .
