import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A consumer group over two topics of three partitions each: members m1, m2, m3 join one by one, then m3 leaves;
 * after each step, once every partition is owned by exactly one member and every member owns some, the assignment
 * is printed. Each member polls on a thread of its own.
 * Args: bootstrap, topic prefix, group.protocol (classic or consumer), assignor (a partition.assignment.strategy
 * class for classic groups, a group.remote.assignor name for consumer groups).
 */
public final class GroupCheck {
    static final Map<String, List<String>> OWNED = new ConcurrentHashMap<>();
    static final Map<String, String> FAILED = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String protocol = args[2];
        String assignor = args[3];
        List<String> topics = List.of(prefix + "-a", prefix + "-b");
        try (Admin admin = Admin.create(Check.props(bootstrap))) {
            for (String t : topics) Check.createTopic(admin, t, 3, Map.of());
        }
        var props = Check.props(bootstrap, "group.id", prefix + "-group", "auto.offset.reset", "earliest",
                "key.deserializer", StringDeserializer.class.getName(),
                "value.deserializer", StringDeserializer.class.getName());
        if (protocol.equals("classic")) {
            props.put("partition.assignment.strategy", assignor);
            props.put("heartbeat.interval.ms", "500"); // members learn of a rebalance sooner than the 3 s default
        } else {
            props.put("group.protocol", protocol);
            props.put("group.remote.assignor", assignor);
        }
        List<Member> members = new ArrayList<>();
        for (String name : List.of("m1", "m2", "m3")) {
            Member m = new Member(name, props, topics, prefix.length() + 1);
            members.add(m);
            m.start();
            report(members.size(), "join-" + name, members);
        }
        Member leaving = members.remove(2);
        leaving.stopAndJoin();
        report(4, "leave-m3", members);
        for (Member m : members) m.stopAndJoin();
    }

    static void report(int step, String what, List<Member> members) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 90_000;
        while (!settled(members)) {
            if (System.currentTimeMillis() > deadline || !FAILED.isEmpty()) {
                Check.emit("check", "assignment", "step", step, "what", what, "error", "timeout",
                        "owned", new TreeMap<>(OWNED));
                return;
            }
            Thread.sleep(50);
        }
        Map<String, Object> owned = new TreeMap<>();
        for (Member m : members) owned.put(m.name, OWNED.get(m.name));
        Check.emit("check", "assignment", "step", step, "what", what, "owned", owned, "error", null);
    }

    /** Every one of the six partitions owned by exactly one live member, and every live member owning one. */
    static boolean settled(List<Member> members) {
        List<String> all = new ArrayList<>();
        for (Member m : members) {
            List<String> mine = OWNED.get(m.name);
            if (mine == null || mine.isEmpty()) return false;
            all.addAll(mine);
        }
        return all.size() == 6 && all.stream().distinct().count() == 6;
    }

    static final class Member extends Thread {
        final String name;
        final java.util.Properties props;
        final List<String> topics;
        final int prefixLength;
        final AtomicBoolean stop = new AtomicBoolean();

        Member(String name, java.util.Properties props, List<String> topics, int prefixLength) {
            this.name = name;
            this.props = new java.util.Properties();
            this.props.putAll(props);
            this.props.put("client.id", name);
            this.topics = topics;
            this.prefixLength = prefixLength;
        }

        @Override
        public void run() {
            try (var c = new KafkaConsumer<String, String>(props)) {
                c.subscribe(topics);
                while (!stop.get()) {
                    c.poll(Duration.ofMillis(100));
                    OWNED.put(name, c.assignment().stream()
                            .map(tp -> tp.toString().substring(prefixLength)).sorted().toList());
                }
            } catch (Exception e) {
                FAILED.put(name, Check.error(e));
                Check.emit("check", "member-failed", "member", name, "error", Check.error(e));
            } finally {
                OWNED.remove(name);
            }
        }

        void stopAndJoin() throws InterruptedException {
            stop.set(true);
            join(60_000);
        }
    }
}
