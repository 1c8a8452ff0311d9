module arborist

go 1.26.8
