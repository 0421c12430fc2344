module example.com/go-detect

go 1.22
