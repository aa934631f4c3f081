"""`receipts.settle` reads answers left unread on Django's connection; when the server dropped the connection before
they came, the connection is replaced, never left busy for the next user (an ORM query then failed with "another
command is already in progress")."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection

from knowledge import receipts
from knowledge.models import MessageReceipt


@pytest.mark.django_db(transaction=True)
def test_a_connection_lost_with_answers_unread_is_replaced_not_left_busy():
    connection.ensure_connection()
    pg = connection.connection
    pid = pg.info.backend_pid
    pg.pgconn.send_query(b"BEGIN; SELECT pg_sleep(0.5); COMMIT")
    receipts._UNREAD.add(pg)
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(100):  # until the backend is gone
            if not other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                break
            time.sleep(0.02)
    assert receipts.settle() is True
    assert MessageReceipt.objects.count() == 0  # the next user gets a working connection
    assert connection.connection is not pg
