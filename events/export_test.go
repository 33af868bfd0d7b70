package events_test

import "github.com/jmoiron/sqlx"

type sqlxTx = sqlx.Tx
