module github.com/ai-dynamo/global-discovery-mcs/gds-client

go 1.26.0
