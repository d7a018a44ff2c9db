module github.com/ai-dynamo/global-discovery-mcs/admin

go 1.26.0
