module github.com/ai-dynamo/global-discovery-mcs/controller

go 1.26.0
