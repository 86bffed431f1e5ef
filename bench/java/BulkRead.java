// ZooKeeper's own Java client reading the same partition states as Keel's bulk read: the
// paths from a file, by multiRead (ZooKeeper 3.6+: multi of getData ops) in chunks of
// `chunk`, at most `window` requests in flight, asynchronously. Prints one line per run:
// the seconds it took and the reads that found data.
//
//   java -cp <zookeeper jars>:<dir> BulkRead <connect> <paths file> <runs> <chunk> <window>

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.ZooKeeper;

public final class BulkRead {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        List<String> paths = Files.readAllLines(Paths.get(args[1]));
        int runs = Integer.parseInt(args[2]);
        int chunk = Integer.parseInt(args[3]);
        int window = Integer.parseInt(args[4]);

        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, 30000, event -> {
            if (event.getState() == org.apache.zookeeper.Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        connected.await();
        List<List<Op>> requests = new ArrayList<>();
        for (int i = 0; i < paths.size(); i += chunk) {
            List<Op> ops = new ArrayList<>();
            for (String path : paths.subList(i, Math.min(paths.size(), i + chunk))) {
                ops.add(Op.getData(path));
            }
            requests.add(ops);
        }
        for (int run = 0; run < runs; run++) {
            Semaphore inFlight = new Semaphore(window);
            CountDownLatch done = new CountDownLatch(requests.size());
            AtomicLong found = new AtomicLong();
            AtomicReference<String> failure = new AtomicReference<>();
            long started = System.nanoTime();
            for (List<Op> ops : requests) {
                inFlight.acquire();
                zk.multi(ops, (rc, path, ctx, results) -> {
                    if (rc != 0) {
                        failure.set("multiRead failed with code " + rc);
                    } else {
                        for (OpResult result : results) {
                            if (result instanceof OpResult.GetDataResult) {
                                byte[] data = ((OpResult.GetDataResult) result).getData();
                                if (data != null) {
                                    found.incrementAndGet();
                                }
                            }
                        }
                    }
                    inFlight.release();
                    done.countDown();
                }, null);
            }
            done.await();
            double seconds = (System.nanoTime() - started) / 1e9;
            if (failure.get() != null) {
                throw new IllegalStateException(failure.get());
            }
            System.out.printf("%.4f %d%n", seconds, found.get());
        }
        zk.close();
    }
}
