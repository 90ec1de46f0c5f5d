"""The pipelines of tests/engine/test_partition_cutoff_rules.py and
tests/e2e/test_partitions_cutoff_and_sensors.py: cutoff assets above keys, a partitioned sensor."""

CUTOFF = """
    import json
    from pathlib import Path
    from barca import asset, partitions, partitions_from, sensor

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor()
    def rates_file() -> str:
        return Path("rates.txt").read_text()

    @asset(inputs={"raw": rates_file}, cutoff=True)
    def rates(raw: str) -> dict:
        _ran("rates")
        return {"rate": int(raw.split()[0])}          # the comment after the rate is dropped

    @asset(partitions={"region": partitions(["emea", "amer", "apac"])}, inputs={"rates": rates})
    def priced(region: str, rates: dict) -> str:
        _ran("priced " + region)
        return f"{region}:{rates['rate']}"

    @asset(partitions={"region": partitions_from(priced)})
    def report(region: str, priced: str) -> str:
        _ran("report " + region)
        return priced.upper()

    @sensor()
    def manifest() -> str:
        return Path("manifest.json").read_text()

    @asset(inputs={"m": manifest}, cutoff=True)
    def keyed(m: str) -> dict:
        _ran("keyed")
        return json.loads(m)

    @asset(partitions={"k": partitions_from(keyed)})
    def per(k: str, keyed) -> str:
        _ran("per " + k)
        return f"{k}@{keyed}"
"""

SENSORS = """
    from pathlib import Path
    from barca import asset, partitions, partitions_from, sensor

    RETAILERS = ["r1", "r2", "r3"]

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor(partitions={"retailer": partitions(RETAILERS)})
    def poll(retailer: str) -> str:
        _ran("poll " + retailer)
        p = Path(retailer + ".txt")
        return p.read_text() if p.exists() else "none"

    @asset(partitions={"retailer": partitions_from(poll)})
    def data(retailer: str, poll: str) -> str:
        _ran("data " + retailer)
        return retailer + ":" + poll
"""
