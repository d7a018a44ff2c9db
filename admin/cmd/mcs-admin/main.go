// Command mcs-admin administers the registry's DynamoDB store: create-table, describe,
// delete-cluster.
package main

import (
	"os"

	"github.com/ai-dynamo/global-discovery-mcs/admin/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
