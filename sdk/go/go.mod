module skyrl.dev/sdk

go 1.24
