package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kvd-project/kvd/client"
)

// List a prefix, then watch it from just after the read: every change
// after the listing arrives, none twice, whatever node fails meanwhile.
func ExampleClient_Watch() {
	endpoint, stop := startExampleNode()
	defer stop()
	c, err := client.New(client.Config{Endpoints: []string{endpoint}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Put(ctx, []byte("cfg/a"), []byte("1")); err != nil {
		log.Fatal(err)
	}
	r, err := c.Prefix(ctx, []byte("cfg/"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("listed", len(r.KVs))
	ch := c.Watch(ctx, []byte("cfg/"), client.WithPrefix(), client.WithFromRevision(r.Revision+1))
	if err := c.Put(ctx, []byte("cfg/b"), []byte("2")); err != nil {
		log.Fatal(err)
	}
	if err := c.Delete(ctx, []byte("cfg/a")); err != nil {
		log.Fatal(err)
	}
	for n := 0; n < 2; {
		resp := <-ch
		if resp.Err != nil {
			log.Fatal(resp.Err)
		}
		for _, e := range resp.Events {
			fmt.Printf("%s %s %s\n", e.Type, e.Key, e.Value)
			n++
		}
	}
	// Output:
	// listed 1
	// PUT cfg/b 2
	// DELETE cfg/a
}
