"""The bundled example: three orders, a cleaned table, a summary and a task that publishes it."""

from barca import asset, task

from helpers import money


@asset()
def orders() -> list:
    return [
        {"id": 1, "customer": "ada", "amount": 120.0},
        {"id": 2, "customer": "bob", "amount": 80.5},
        {"id": 3, "customer": "ada", "amount": 42.25},
    ]


@asset(inputs={"orders": orders})
def summary(orders: list) -> dict:
    totals: dict[str, float] = {}
    for order in orders:
        totals[order["customer"]] = totals.get(order["customer"], 0.0) + order["amount"]
    return {"customers": len(totals), "revenue": money(sum(totals.values())), "by_customer": totals}


@task(inputs={"summary": summary})
def publish(summary: dict) -> str:
    print(f"publishing revenue {summary['revenue']}")
    return f"published {summary['customers']} customers"
