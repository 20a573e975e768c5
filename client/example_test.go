package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/kvd-project/kvd/client"
)

func Example() {
	c, err := client.New(client.Config{Endpoints: []string{"127.0.0.1:7301"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	if err := c.Put(ctx, []byte("hello"), []byte("world")); err != nil {
		log.Fatal(err)
	}
	v, err := c.Get(ctx, []byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", v)

	_, err = c.Get(ctx, []byte("missing"))
	fmt.Println(errors.Is(err, client.ErrNotFound))
}
